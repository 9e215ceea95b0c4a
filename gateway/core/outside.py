"""The candidate pool's outside bound: the proof that a page left out of the pool could not have been shown.

A request gives the budget (:func:`gateway.core.budget.fit_rendered`) as candidates only the pages it could
show (:mod:`gateway.service.candidate_pool`); every other page goes to the fit as an :class:`Outside`, an upper
bound of what any of its first steps is worth per token (``priority ** RELEVANCE_POWER`` times the best of 1 — a
node never covers more than it costs —, its line's and its excerpts' coverage x size / cost, see
:func:`outside_bound` and :func:`outside_at`) and its cheapest entry. The fill logs each value it pops and the
total before it; a page outside cannot be popped while a step worth more is on top, and from then on the total
only grows, so if the room left there is below its cheapest entry it can never be shown, and the fill is the one
all pages as candidates would give (:func:`check_outside`). When that cannot be shown, :class:`PoolExceeded` is
raised and the caller fits again with more candidates.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.core.worth import NODE_OVERHEAD, RELEVANCE_POWER, Excerpt, share_of

__all__ = ["OUTSIDE_MARGIN", "Outside", "PoolExceeded", "check_outside", "outside_at", "outside_bound"]

# an Outside's worth is a hair above its bound: strictly more than the fill's own product (value / paid, rounded
# in another order)
OUTSIDE_MARGIN = 1 + 1e-9


class PoolExceeded(Exception):
    """A page left out of the pool (:class:`Outside`) might have been shown: fit again with it as a Candidate.
    The fill's pops come with it, so that the caller can tell which of all the pages it left out might have been
    (:meth:`shows`; `gateway.service.candidate_pool` asks it of every page at once) and take just those:
    ``floor``, the lowest value popped after each pop, negated (increasing); ``totals``, the total before each pop
    and, last, the total at the end; ``room``, the limit with what the fill gave back on its way."""

    def __init__(self, floor: Sequence[float], totals: Sequence[int], room: int) -> None:
        super().__init__("a page left out of the pool might have been shown")
        self.floor, self.totals, self.room = tuple(floor), tuple(totals), room

    def shows(self, worth: float, cheapest: int) -> bool:
        """Whether a page left out, ``worth`` and ``cheapest`` as in :class:`Outside`, fails
        :func:`check_outside`'s test: the pages a next pool must take (no other page left out could be shown before
        one of them is)."""
        first = bisect.bisect_right(self.floor, -worth)  # its first pop of a value < its worth
        return self.room - self.totals[first] >= cheapest


@dataclass(frozen=True)
class Outside:
    """A page left out of the pool before fitting; not pinned, not asked Unpacked. ``worth``: strictly more than
    any of its first steps could be worth per token (see :func:`outside_bound`); ``cheapest``: its cheapest entry's
    cost in tokens."""

    worth: float
    cheapest: int


def outside_bound(
    *,
    detail_tokens: int,
    summary_tokens: int,
    background_tokens: int,
    line_coverage: float | None = None,
    content_on_line: bool = False,
    excerpts: Sequence[Excerpt] = (),
    node_overhead: int = NODE_OVERHEAD,
) -> tuple[float, int]:
    """The part of a page's :class:`Outside` that does not depend on its priority (the same on every request while
    its excerpts are the same): its best first step's gain per token and its cheapest entry. A step is worth
    ``priority ** RELEVANCE_POWER`` times the coverage it adds times the page's tokens, per token it adds; the first
    step from nothing is worth at most its option's coverage x tokens / cost, and no later step is taken before a
    first one. A Summary or Detail node covers less than its cost in the page's tokens (the node's tags,
    ``node_overhead`` > 0, are on top), so it never exceeds 1 per token; the line and the excerpts are counted as
    they are (``line_coverage`` defaults as :class:`gateway.core.budget.Candidate`'s does). The cheapest entry is
    the cheapest of them all, nodes included."""
    if line_coverage is None:
        line_coverage = 1.0 if content_on_line else share_of(background_tokens, detail_tokens)
    size = max(detail_tokens, 1)
    costs = [background_tokens + 1, min(summary_tokens, detail_tokens) + node_overhead, *(e.tokens + 1 for e in excerpts)]
    gains = [1.0, line_coverage * size / (background_tokens + 1), *(e.coverage * size / (e.tokens + 1) for e in excerpts)]
    return max(gains), min(costs)


def outside_at(priority: float, gain: float, cheapest: int) -> Outside:
    """The :class:`Outside` of a page of ``priority`` from its :func:`outside_bound`."""
    return Outside(priority**RELEVANCE_POWER * gain * OUTSIDE_MARGIN, cheapest)


def check_outside(outside: Sequence[Outside], pops: Sequence[tuple[float, int]], end: int, limit: int, regained: int = 0) -> None:
    """Raise :class:`PoolExceeded` unless no page of ``outside`` could have been shown had it been a candidate.

    ``pops``: each value per token the fill popped, with the total before it; ``end``: the total after the last.
    The fill pops the step of highest value per token, so a page outside is not popped while a candidate's step
    of a value >= its ``worth`` (more than its own) is on top, and until then the fill runs as it did without
    it (the candidates keep their order among themselves). From there on the total only grows: if the room
    left then is smaller than its cheapest entry, it is never shown (and by induction neither is any other, so
    the fill is the same). ``regained``: what the fill gave back on its way (map entries of containers a page of which
    it showed), room the total may have grown by again after any pop: counted as room left."""
    floor: list[float] = []  # the lowest value popped so far, after each pop (non-increasing)
    lowest = math.inf
    for value, _ in pops:
        lowest = min(lowest, value)
        floor.append(-lowest)  # increasing, for bisect
    for page in outside:
        first = bisect.bisect_right(floor, -page.worth)  # the first pop of a value < worth
        before = pops[first][1] if first < len(pops) else end
        if limit - before + regained >= page.cheapest:
            raise PoolExceeded(floor, [*(total for _, total in pops), end], limit + regained)
