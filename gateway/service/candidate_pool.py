"""Which of a thread's top-level pages become the budget's candidates for one request (see :func:`candidate_pool`).

A request builds :class:`~gateway.core.budget.Candidate` objects only for the pages the budget could show; every
other page goes to the fit as an :class:`~gateway.core.budget.Outside`, which the budget checks could never have
been shown (else the caller takes more, see :data:`POOL_SPARES`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from gateway.adapters.manifests import Manifest, micros
from gateway.core import Excerpt, LineHolds
from gateway.core.budget import DEFAULT_HALF_LIFE, Outside, outside_at, outside_bound, rank_by_age
from gateway.core.excerpt import ExcerptOption
from gateway.core.pages import utc

__all__ = ["POOL_SPARES", "candidate_pool", "refreshed"]

# How many times the most pages the budget can show are taken as candidates, in priority order, before all are
# (see candidate_pool): most requests need only the first, a few (excerpts worth more than their page's priority) more.
POOL_SPARES = (1, 4)


def refreshed(timestamp: datetime, seen: datetime | None) -> datetime:
    """A page's time for its priority: a page opened recently is a quarter younger for it (use keeps it fresher,
    but not fresher than a relevant page the model has not needed yet)."""
    return timestamp + (seen - timestamp) / 4 if seen and seen > timestamp else timestamp


def candidate_pool(
    roots: Sequence[str],
    manifests: Mapping[str, Manifest],
    relevance: Mapping[str, float],
    seen: Mapping[str, datetime],
    now: datetime,
    room: int,
    excerpts: Mapping[str, tuple[float | None, tuple[ExcerptOption, ...], float]],
    must: set[str],
    spare: int = 1,
) -> tuple[list[str], list[Outside]]:
    """The top-level pages that become the budget's candidates, and the rest as :class:`Outside` pages.

    The budget shows at most ``room`` // (the cheapest entry of any page) pages, so the candidates are that many
    plus one first in the fill's own order (priority, then newer, then id), and the pages in ``must`` (the model
    opened them or asked them Unpacked; the excerpted ones, whose excerpts may be worth far more per token than
    their priority); the budget checks that none of the rest could have been shown (else the caller fits them
    all). A request then builds candidates for what the budget can show, not for the whole thread. ``spare``
    multiplies the number taken in priority order (the fill goes by value per token, not priority)."""
    ranked: list[tuple[float, float, str]] = []
    cheapest = None
    # a page's age as timedelta.total_seconds() would give it (exact microseconds, divided once), from what its
    # manifest keeps: no datetime arithmetic per page on every request
    now_us, half_life = micros(now), DEFAULT_HALF_LIFE.total_seconds()
    for r in roots:
        manifest = manifests[r]
        last = seen.get(r)
        if last is None:
            written, stamp = manifest.written_us, manifest.written_ts
        else:
            moment = utc(refreshed(manifest.page.timestamp, last))
            written, stamp = micros(moment), moment.timestamp()
        ranked.append((-rank_by_age((now_us - written) / 1_000_000, relevance[r], half_life), -stamp, r))
        entry = manifest.bound[1]
        cheapest = entry if cheapest is None or entry < cheapest else cheapest
    ranked.sort()
    if cheapest is None or room <= 0:
        return list(roots), []
    for _, options, _ in excerpts.values():
        cheapest = min([cheapest, *(option.tokens + 1 for option in options)])
    size = spare * (room // cheapest + 1)
    chosen = {r for _, _, r in ranked[:size]} | must
    rest = []
    for negative, _, r in ranked[size:]:
        if r in must:
            continue
        manifest = manifests[r]
        excerpted = excerpts.get(r)
        if excerpted is None:
            gain, least = manifest.bound
        else:
            # its value counted on all its tokens (not only those that can hold the answer): still an upper bound
            line, options, _ = excerpted
            gain, least = outside_bound(
                detail_tokens=manifest.page.tokens,
                summary_tokens=manifest.summary_tokens,
                background_tokens=manifest.background_tokens,
                line_coverage=line,
                content_on_line=manifest.line is LineHolds.CONTENT,
                excerpts=[Excerpt(option.tokens, option.coverage) for option in options],
            )
        rest.append(outside_at(-negative, gain, least))
    return [r for r in roots if r in chosen], rest  # in conversation order, as the fit lists its views
