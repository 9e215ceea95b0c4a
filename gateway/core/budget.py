"""The token budget: fit the paged part of a context into a budget by demoting nodes (PCP §V.3).

Demotion order is a double decay of age and relevance. Each candidate gets

    priority = (FLOOR + (1 - FLOOR) * relevance) * (AGE_FLOOR + (1 - AGE_FLOOR) * 0.5 ** (age / half_life))

(``relevance`` in [0, 1], ``age = now - timestamp`` clamped at 0, ``FLOOR`` = 0.1 so that age still orders
pages of zero relevance, ``AGE_FLOOR`` = 0.8 so that age takes at most a fifth of a page's priority: in a
conversation that spans months a relevant old page must still beat a less relevant recent one). When the candidates at their requested views do not fit, the context is filled from the
highest priority down: each page takes the richest level that still fits, in the order

requested view (Unpacked / Detail / Summary) → Detail (from Unpacked, only where smaller) → Summary →
a line folded into ``<Background_Context>`` → dropped.

A page whose line carries its whole summary (``summary_on_line``) skips the Summary node, and one whose line
carries its whole content (``content_on_line``: a short exchange under the extractive summary) skips the Detail
node too: the node would add only its tags (~40 tokens) to the same text, and the line costs a fraction of
that, so a tight context shows more pages. When everything fits, nothing is demoted and such a page keeps its
requested view. Lines are filed under one date line per day (the page's own, ``written``), which the estimate
counts once per day.

So the most relevant, most recent pages keep their detail and the least keep nothing, and a page of high priority
is never demoted to make room for one of lower priority. Ties go to the newer page.

Contract of :func:`fit_context`: the client-owned part (``fixed_tokens``: system prompt, recent turns, live turn,
plus the XML skeleton) is never reduced. If it fits the budget, the estimated total never exceeds the budget.
If it alone exceeds the budget, the smallest context (no pages at all) is returned with ``over_budget=True``.
Only when it exceeds the model's context window is :class:`ContextWindowExceeded` raised.

Per-page token counts are inputs (precomputed at ingestion), so :func:`fit_context` is an estimate;
:func:`fit_rendered` checks the real rendering with a measuring callable and tightens until it fits.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from types import MappingProxyType

from gateway.core.errors import ContextWindowExceeded
from gateway.core.pages import utc
from gateway.core.views import View

__all__ = [
    "BACKGROUND_OVERHEAD",
    "DAY_OVERHEAD",
    "DEFAULT_HALF_LIFE",
    "AGE_FLOOR",
    "FLOOR",
    "NODE_OVERHEAD",
    "Candidate",
    "Demotion",
    "FitResult",
    "Level",
    "fit_context",
    "fit_rendered",
    "priority",
]

DEFAULT_HALF_LIFE = timedelta(hours=24)
FLOOR = 0.1
AGE_FLOOR = 0.8
NODE_OVERHEAD = 40
BACKGROUND_OVERHEAD = 10
DAY_OVERHEAD = 7  # the "YYYY-MM-DD:" line that heads a day's lines in <Background_Context> (cl100k)


class Level(enum.Enum):
    """Where a candidate ends up, from most to least present."""

    UNPACKED = "Unpacked"
    DETAIL = "Detail"
    SUMMARY = "Summary"
    BACKGROUND = "Background"
    DROPPED = "Dropped"


_AS_LEVEL = {View.UNPACKED: Level.UNPACKED, View.DETAIL: Level.DETAIL, View.SUMMARY: Level.SUMMARY}
_AS_VIEW = {level: view for view, level in _AS_LEVEL.items()}


@dataclass(frozen=True)
class Candidate:
    """A top-level page that may appear in ``<Linear_Flow>``.

    Token fields are the page's text in each view (without the node tags, see ``node_overhead``);
    ``background_tokens`` is its line once folded; ``unpacked_tokens`` is needed only when the
    requested ``view`` is Unpacked (the nested rendering). ``summary_on_line``: the folded line holds the
    whole summary, so the Summary level is skipped when the context does not fit; ``content_on_line``: it
    holds the whole content, so Detail is skipped as well. ``written``: the page's own time, which orders
    the lines and files each under its date (default: ``timestamp``; pass it when ``timestamp`` is shifted).
    """

    id: str
    relevance: float
    timestamp: datetime
    summary_tokens: int
    detail_tokens: int
    view: View = View.SUMMARY
    background_tokens: int = 0
    unpacked_tokens: int | None = None
    summary_on_line: bool = False
    content_on_line: bool = False
    written: datetime | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.relevance <= 1.0:
            raise ValueError(f"candidate {self.id}: relevance must be in [0, 1]")
        if min(self.summary_tokens, self.detail_tokens, self.background_tokens, self.unpacked_tokens or 0) < 0:
            raise ValueError(f"candidate {self.id}: token counts must be >= 0")
        if self.view is View.UNPACKED and self.unpacked_tokens is None:
            raise ValueError(f"candidate {self.id}: an Unpacked candidate needs unpacked_tokens")
        object.__setattr__(self, "timestamp", utc(self.timestamp))
        object.__setattr__(self, "written", self.timestamp if self.written is None else utc(self.written))

    @property
    def day(self) -> date:
        """The date its line is filed under in ``<Background_Context>``."""
        assert self.written is not None  # set in __post_init__
        return self.written.date()


@dataclass(frozen=True)
class Demotion:
    """One step taken by the budget: page ``id`` went from ``before`` to ``after``."""

    id: str
    before: Level
    after: Level
    priority: float


@dataclass(frozen=True)
class FitResult:
    """What fits. ``views``: the pages kept in ``<Linear_Flow>`` (input order) and their views.
    ``background_ids``: pages folded into ``<Background_Context>``, oldest first. ``dropped_ids``: pages left out.
    ``total_tokens``: the (estimated, or measured by :func:`fit_rendered`) total including ``fixed_tokens``.
    ``limit``: the budget applied (the smaller of budget and window)."""

    views: Mapping[str, View]
    background_ids: tuple[str, ...]
    dropped_ids: tuple[str, ...]
    total_tokens: int
    over_budget: bool
    demotions: tuple[Demotion, ...]
    limit: int


def priority(candidate: Candidate, now: datetime, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """The double-decay priority of ``candidate`` at ``now`` (see the module docstring)."""
    age = max((utc(now) - candidate.timestamp).total_seconds(), 0.0)
    decay = AGE_FLOOR + (1.0 - AGE_FLOOR) * 0.5 ** (age / half_life.total_seconds())
    return float((FLOOR + (1.0 - FLOOR) * candidate.relevance) * decay)


@dataclass(frozen=True)
class _Policy:
    now: datetime
    half_life: timedelta
    node_overhead: int
    background_overhead: int
    day_overhead: int


class _Plan:
    def __init__(self, candidates: Sequence[Candidate], fixed: int, policy: _Policy):
        self.candidates = list(candidates)
        self.levels = {c.id: _AS_LEVEL[c.view] for c in candidates}
        self.fixed, self.policy = fixed, policy
        self.demotions: list[Demotion] = []

    def cost(self, candidate: Candidate, level: Level) -> int:
        if level is Level.UNPACKED:
            return (candidate.unpacked_tokens or 0) + self.policy.node_overhead
        if level is Level.DETAIL:
            return candidate.detail_tokens + self.policy.node_overhead
        if level is Level.SUMMARY:
            return candidate.summary_tokens + self.policy.node_overhead
        if level is Level.BACKGROUND:
            return candidate.background_tokens + 1
        return 0

    def total(self) -> int:
        nodes = sum(self.cost(c, self.levels[c.id]) for c in self.candidates)
        days = {c.day for c in self.candidates if self.levels[c.id] is Level.BACKGROUND}
        return self.fixed + nodes + (self.policy.background_overhead if days else 0) + self.policy.day_overhead * len(days)

    def demote(self, candidate: Candidate, after: Level, rank: float) -> None:
        self.demotions.append(Demotion(candidate.id, self.levels[candidate.id], after, rank))
        self.levels[candidate.id] = after

    def result(self, limit: int) -> FitResult:
        total = self.total()
        kept = {c.id: _AS_VIEW[level] for c in self.candidates if (level := self.levels[c.id]) in _AS_VIEW}
        by_time = sorted(self.candidates, key=lambda c: (c.written, c.id))
        return FitResult(
            views=MappingProxyType(kept),
            background_ids=tuple(c.id for c in by_time if self.levels[c.id] is Level.BACKGROUND),
            dropped_ids=tuple(c.id for c in self.candidates if self.levels[c.id] is Level.DROPPED),
            total_tokens=total,
            over_budget=total > limit,
            demotions=tuple(self.demotions),
            limit=limit,
        )


def _limit(budget: int, window: int | None) -> int:
    if budget < 0 or (window is not None and window < 0):
        raise ValueError("budget and window must be >= 0")
    return budget if window is None else min(budget, window)


def _chain(candidate: Candidate, plan: _Plan) -> list[Level]:
    """The levels a candidate may take, from its requested one down to a background note."""
    requested = _AS_LEVEL[candidate.view]
    if candidate.content_on_line and requested is not Level.UNPACKED:
        return [Level.BACKGROUND]
    chain = [requested]
    if requested is Level.UNPACKED and plan.cost(candidate, Level.DETAIL) < plan.cost(candidate, Level.UNPACKED):
        chain.append(Level.DETAIL)
    if candidate.summary_on_line:
        chain = [level for level in chain if level is not Level.SUMMARY]
    elif requested is not Level.SUMMARY:
        chain.append(Level.SUMMARY)
    chain.append(Level.BACKGROUND)
    return chain


def _fit(candidates: Sequence[Candidate], fixed: int, limit: int, policy: _Policy, *, minimal: bool) -> FitResult:
    if len({c.id for c in candidates}) != len(candidates):
        raise ValueError("candidate ids must be unique")
    plan = _Plan(candidates, fixed, policy)
    ranks = {c.id: priority(c, policy.now, policy.half_life) for c in candidates}
    order = sorted(candidates, key=lambda c: (ranks[c.id], c.timestamp, c.id))
    if minimal:
        for candidate in order:
            plan.demote(candidate, Level.DROPPED, ranks[candidate.id])
        return plan.result(limit)
    if plan.total() <= limit:
        return plan.result(limit)
    # Fill from the highest priority down: each page takes the richest level that still fits.
    running, days = fixed, set[date]()
    for candidate in reversed(order):
        requested = plan.levels[candidate.id]
        chosen = Level.DROPPED
        for level in _chain(candidate, plan):
            envelope = 0
            if level is Level.BACKGROUND:  # the element's tags with the first line, a date with a day's first
                envelope = (0 if days else policy.background_overhead) + (0 if candidate.day in days else policy.day_overhead)
            if running + plan.cost(candidate, level) + envelope <= limit:
                chosen = level
                running += plan.cost(candidate, level) + envelope
                if level is Level.BACKGROUND:
                    days.add(candidate.day)
                break
        if chosen is not requested:
            plan.demote(candidate, chosen, ranks[candidate.id])
    return plan.result(limit)


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
) -> FitResult:
    """Choose each candidate's place so that the estimated total fits ``min(budget, window)``.

    Raises :class:`ContextWindowExceeded` when ``fixed_tokens`` alone exceeds ``window``, ``ValueError`` for
    duplicate candidate ids or a negative budget.
    """
    limit = _limit(budget, window)
    if window is not None and fixed_tokens > window:
        raise ContextWindowExceeded(fixed_tokens, window)
    policy = _Policy(now, half_life, node_overhead, background_overhead, day_overhead)
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
    max_rounds: int = 4,
) -> FitResult:
    """:func:`fit_context`, checked against the real output.

    ``measure(result)`` must render the context for ``result`` and return its true token count (fixed part
    included). While the measurement exceeds the limit, the fit is redone with the overshoot taken off the
    budget; after ``max_rounds`` the smallest context (no pages) is used. The returned ``total_tokens`` is the
    measured count, so ``over_budget`` is true only if even the smallest context does not fit. Raises
    :class:`ContextWindowExceeded` if the smallest context exceeds ``window``.
    """
    limit = _limit(budget, window)
    if window is not None and fixed_tokens > window:
        raise ContextWindowExceeded(fixed_tokens, window)
    policy = _Policy(now, half_life, node_overhead, background_overhead, day_overhead)
    margin = 0
    for _ in range(max_rounds):
        target = limit - margin
        result = _fit(candidates, fixed_tokens, max(target, 0), policy, minimal=fixed_tokens > target)
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
