"""The outside bound: a pool fitted with the rest of the pages left outside fits as all of them would, or says it
cannot (:mod:`gateway.core.outside`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.budget import Candidate, FitResult, fit_rendered, priority
from gateway.core.outside import Outside, PoolExceeded, outside_at, outside_bound
from gateway.core.views import View
from gateway.core.worth import Excerpt

NOW = datetime(2026, 2, 14, 12, 0, tzinfo=timezone.utc)
S, D = View.SUMMARY, View.DETAIL


def cand(cid: str, relevance: float = 0.5, hours: float = 1, summary: int = 10, detail: int = 100,
         view: View = D, background: int = 5, unpacked: int | None = None) -> Candidate:
    return Candidate(cid, relevance, NOW - timedelta(hours=hours), summary, detail, view, background, unpacked)


def _outside(c: Candidate) -> Outside:
    return outside_at(priority(c, NOW), *outside_bound(
        detail_tokens=c.detail_tokens, summary_tokens=c.summary_tokens, background_tokens=c.background_tokens,
        line_coverage=c.line_coverage, content_on_line=c.content_on_line, excerpts=c.excerpts,
    ))  # fmt: skip


def _fill(candidates: list[Candidate], budget: int, fixed: int, rest: Sequence[Outside] = ()) -> FitResult:
    # a rendering that costs a little more than estimated when it shows pages, so that fit_rendered tightens
    return fit_rendered(candidates, fixed_tokens=fixed, budget=budget, now=NOW, outside=rest,
                        measure=lambda r: r.total_tokens + 3 * len(r.views) + len(r.background_ids) // 2)


page_shape = st.tuples(
    st.floats(0, 1), st.floats(0, 24 * 60), st.integers(0, 60), st.integers(0, 800), st.integers(1, 80),
    st.booleans(), st.lists(st.tuples(st.integers(3, 60), st.floats(0, 1)), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(shapes=st.lists(page_shape, min_size=1, max_size=40), budget=st.integers(0, 500), fixed=st.integers(0, 60),
       left=st.integers(1, 12))
def test_a_pool_with_the_rest_outside_fits_as_all_of_them_or_names_the_pages_it_might_have_shown(
    shapes: list[tuple[float, float, int, int, int, bool, list[tuple[int, float]]]], budget: int, fixed: int, left: int
) -> None:
    # the rest is checked against the fill: the same views, lines, excerpts and totals as with every page a
    # candidate, or PoolExceeded naming the pages left out that might have been shown; the pool that takes them is
    # checked again (gateway.service.view_choice's retries), until it fits
    pages = [
        Candidate(f"p{n}", relevance, NOW - timedelta(hours=hours), summary, detail, S, background,
                  content_on_line=on_line and background >= detail,
                  excerpts=tuple(Excerpt(tokens, coverage) for tokens, coverage in sorted(excerpts)))
        for n, (relevance, hours, summary, detail, background, on_line, excerpts) in enumerate(shapes)
    ]
    whole = _fill(pages, budget, fixed)
    order = sorted(pages, key=lambda c: (-priority(c, NOW), -c.timestamp.timestamp(), c.id))
    pool = order[: max(len(pages) - left, 0)]
    while True:
        rest = [c for c in order if c not in pool]
        try:
            part = _fill([c for c in pages if c in pool], budget, fixed, [_outside(c) for c in rest])
            break
        except PoolExceeded as exc:
            named = [c for c in rest if exc.shows(_outside(c).worth, _outside(c).cheapest)]
            assert named  # a failed check names a page, so the pool grows each time
            pool += named
    assert (dict(part.views), part.background_ids, dict(part.excerpts), part.total_tokens, part.over_budget) == (
        dict(whole.views), whole.background_ids, dict(whole.excerpts), whole.total_tokens, whole.over_budget)


def test_a_page_left_outside_that_would_be_shown_is_reported() -> None:
    first, second = cand("a", 1.0, background=20), cand("b", 0.1, 48, background=20)
    with pytest.raises(PoolExceeded):  # room for both lines: b would be shown
        _fill([first], 2000, 0, [_outside(second)])
    # no room left for b's line once a is shown: b could not have been
    assert _fill([first], 40, 0, [_outside(second)]).background_ids == ("a",)
    assert _fill([first, second], 40, 0).background_ids == ("a",)
