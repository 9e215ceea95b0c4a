"""What the token budget (:mod:`gateway.core.budget`) weighs and what it returns: a page as a *candidate* (its
views' costs, its excerpts, its relevance and age, what it is to the thread's map) and the *fit* chosen for a
request's candidates (the views kept, the lines and excerpts in ``<Background_Context>``, the map's entries, the
pages demoted or left out), with :func:`priority` and :func:`shows_whole`, which read them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from types import MappingProxyType

from gateway.core.pages import utc
from gateway.core.views import View
from gateway.core.worth import DEFAULT_HALF_LIFE, Excerpt, rank, share_of

__all__ = ["Candidate", "Demotion", "FitResult", "Level", "priority", "shows_whole"]


class Level(enum.Enum):
    """Where a candidate ends up, from most to least present."""

    UNPACKED = "Unpacked"
    DETAIL = "Detail"
    SUMMARY = "Summary"
    EXCERPT = "Excerpt"
    BACKGROUND = "Background"
    DROPPED = "Dropped"


@dataclass(frozen=True)
class Candidate:
    """A top-level page that may appear in the context.

    Token fields are the page's text in each view (without the node tags: the fill's ``node_overhead``);
    ``background_tokens`` is its line once folded; ``unpacked_tokens`` is needed only when ``view`` is Unpacked
    (the nested rendering). ``view`` is the view asked for: pinned pages (``pinned``: the model opened them)
    take it first; Unpacked is offered only when asked for; every other page may go up to Detail.
    ``summary_on_line``: the line holds the whole summary, so the Summary node is never worth it;
    ``content_on_line``: it holds the whole content, so neither is the Detail node (unless pinned).
    ``excerpts``: nested excerpt options, smallest first. ``detail``: whether the Detail node may be chosen
    (the page's content is at hand; a pinned page's always is). ``line_coverage``: the share of the page its line shows
    (default: 1 with ``content_on_line``, else its tokens' share of the page's). ``written``: the page's own
    time, which orders the lines and files each under its date (default: ``timestamp``; pass it when
    ``timestamp`` is shifted).
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
    excerpts: tuple[Excerpt, ...] = ()
    line_coverage: float | None = None
    pinned: bool = False
    detail: bool = True
    worth_tokens: int | None = None  # the tokens that can hold what is asked (default: detail_tokens)
    floor: int | None = None  # an excerpt taken before any page is weighed (the question of the exchange a turn follows)
    # the excerpt that is this container's entry in the thread's map, weighed like any other; and the candidate
    # whose entry names this page (its laid-open container): once this page is shown, that entry is given back (this
    # page may take its place) and not taken again
    map_entry: int | None = None
    inside: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.relevance <= 1.0:
            raise ValueError(f"candidate {self.id}: relevance must be in [0, 1]")
        if min(self.summary_tokens, self.detail_tokens, self.background_tokens, self.unpacked_tokens or 0) < 0:
            raise ValueError(f"candidate {self.id}: token counts must be >= 0")
        if self.view is View.UNPACKED and self.unpacked_tokens is None:
            raise ValueError(f"candidate {self.id}: an Unpacked candidate needs unpacked_tokens")
        if any(not 0.0 <= e.coverage <= 1.0 or e.tokens < 0 for e in self.excerpts):
            raise ValueError(f"candidate {self.id}: an excerpt needs tokens >= 0 and coverage in [0, 1]")
        object.__setattr__(self, "timestamp", utc(self.timestamp))
        object.__setattr__(self, "written", self.timestamp if self.written is None else utc(self.written))
        if self.floor is not None and not 0 <= self.floor < len(self.excerpts):
            raise ValueError(f"candidate {self.id}: floor must name one of its excerpts")
        if self.map_entry is not None and not 0 <= self.map_entry < len(self.excerpts):
            raise ValueError(f"candidate {self.id}: map_entry must name one of its excerpts")
        if self.worth_tokens is not None and not 0 <= self.worth_tokens <= self.detail_tokens:
            raise ValueError(f"candidate {self.id}: worth_tokens must be in [0, detail_tokens]")
        if self.line_coverage is None:
            share = 1.0 if self.content_on_line else share_of(self.background_tokens, self.detail_tokens)
            object.__setattr__(self, "line_coverage", share)

    @property
    def worth(self) -> int:
        """The page's tokens an option's coverage is a share of, in its value (``worth_tokens``, or all of them)."""
        return self.detail_tokens if self.worth_tokens is None else self.worth_tokens

    @property
    def day(self) -> date:
        """The date its line is filed under in ``<Background_Context>``."""
        assert self.written is not None  # set in __post_init__
        return self.written.date()


@dataclass(frozen=True)
class Demotion:
    """A page that ended below the view asked for: ``before`` (asked) and ``after`` (given)."""

    id: str
    before: Level
    after: Level
    priority: float


@dataclass(frozen=True)
class FitResult:
    """What fits. ``views``: the pages kept as nodes in ``<Linear_Flow>`` (input order) and their views.
    ``background_ids``: pages with an entry in ``<Background_Context>``, oldest first: a line, or an excerpt when
    listed in ``excerpts`` (page id -> index into its candidate's ``excerpts``). ``dropped_ids``: pages left out.
    ``total_tokens``: the (estimated, or measured by :func:`fit_rendered`) total including ``fixed_tokens``.
    ``limit``: the budget applied (the smaller of budget and window)."""

    views: Mapping[str, View]
    background_ids: tuple[str, ...]
    dropped_ids: tuple[str, ...]
    total_tokens: int
    over_budget: bool
    demotions: tuple[Demotion, ...]
    limit: int
    excerpts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    mapped: frozenset[str] = frozenset()  # the pages of ``background_ids`` listed as map entries, under the map's heading


def shows_whole(result: FitResult, candidates: Sequence[Candidate]) -> bool:
    """Whether ``result`` shows every one of ``candidates`` whole, within its limit: at coverage 1 as the fill counts
    it (a Detail or Unpacked node, the excerpt that is the page, a line that holds it, a Summary node as long as
    the page). Then the pages' relevance had nothing to choose: no page could be shown more fully, and a context
    lists its pages by time, not by rank."""
    if result.over_budget:
        return False
    for candidate in candidates:
        view = result.views.get(candidate.id)
        if view is View.SUMMARY:
            coverage = share_of(candidate.summary_tokens, candidate.detail_tokens)
        elif view is not None:
            coverage = 1.0
        elif candidate.id in result.excerpts:
            coverage = candidate.excerpts[result.excerpts[candidate.id]].coverage
        elif candidate.id in result.background_ids:
            coverage = candidate.line_coverage or 0.0
        else:
            return False
        if coverage < 1.0:
            return False
    return True


def priority(candidate: Candidate, now: datetime, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """The double-decay priority of ``candidate`` at ``now`` (:func:`gateway.core.worth.rank`)."""
    return rank(candidate.relevance, candidate.timestamp, now, half_life)
